// The local Redis Cluster the `redis+cluster://` suite drives, started as the Redis store's suites start it.
export { default } from '../../store-redis/test/global-setup.js';
