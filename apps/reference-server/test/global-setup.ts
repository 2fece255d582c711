// The local 3-master Redis Cluster the store-settings suites use, started as @idem/store-redis's suites start it.
export { default } from '../../../packages/store-redis/test/global-setup.js';
