export { CliError, ExitCode } from './cli-error.js';
export { normalizeKey } from './commands.js';
export {
  isMissingTable,
  type MigrateOutcome,
  type OpenedStore,
  type OpenOptions,
  openStore,
} from './open-store.js';
export type { Io } from './output.js';
export { run, URL_VARIABLE } from './program.js';
export { parseStoreUrl, type StoreUrl } from './store-url.js';
