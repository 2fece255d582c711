import { betterSqlite3 } from './better-sqlite3.js';
import { type Driver, recognise } from './driver.js';
import { mysql2 } from './mysql2.js';
import { nodePostgres } from './node-postgres.js';
import { pglite } from './pglite.js';
import { postgresJs } from './postgres-js.js';

/** Every client library the store runs on; adding one is a file in this folder and a line here. */
export const DRIVERS: readonly Driver[] = [nodePostgres, pglite, postgresJs, mysql2, betterSqlite3];

/** The driver of a Drizzle database or transaction; a TypeError naming the supported ones otherwise. */
export const driverOf = (db: unknown): Driver => recognise(db, DRIVERS);
