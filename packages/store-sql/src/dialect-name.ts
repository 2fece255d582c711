/**
 * The SQL dialects the store speaks; one name each, in options, folders and types. Its own module: the
 * dialects (grammar) and the drivers (clients) both name it, and neither imports the other's folder for it.
 */
export type DialectName = 'postgres' | 'mysql' | 'sqlite';
