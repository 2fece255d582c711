/** The table name used when none is given. */
export const DEFAULT_TABLE = 'idem_records';

// Index and constraint names are derived from the table name and must stay within PostgreSQL's 63.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,39}$/;

/** A table name is an identifier of at most 40 letters, digits and underscores. */
export function checkTableName(name: string): string {
  if (!TABLE_NAME.test(name)) {
    throw new TypeError(`table name ${JSON.stringify(name)} must be 1-40 letters, digits or underscores`);
  }
  return name;
}
