/** The SQL databases the catalog runs on. */
export type Dialect = 'sqlite' | 'postgres' | 'mysql';

/**
 * The catalog's tables. Names are exact on every database: text on SQLite and PostgreSQL, bytes on MySQL
 * (whose collations would merge `Orders`, `orders` and `orders `; see @idem/store-sql).
 *
 * MySQL's other text columns name their character set: a database created in latin1 (MariaDB's default before
 * 11.6, or a server configured so) would otherwise refuse every non-Latin-1 column name, property or SQL text,
 * and utf8mb4 (not MySQL's 3-byte utf8) holds emoji. `utf8mb4_bin` compares them exactly, as names are.
 */
export function catalogDdl(dialect: Dialect): string[] {
  // MySQL caps a primary key at 3072 bytes: prefix 255 + namespace 1020 + name 1020 bytes fit.
  const prefix = dialect === 'mysql' ? 'varbinary(255)' : dialect === 'postgres' ? 'varchar(255)' : 'text';
  const name = dialect === 'mysql' ? 'varbinary(1020)' : dialect === 'postgres' ? 'varchar(255)' : 'text';
  const path = dialect === 'mysql' ? 'varbinary(1020)' : dialect === 'postgres' ? 'varchar(1024)' : 'text';
  const utf8 = dialect === 'mysql' ? ' CHARACTER SET utf8mb4 COLLATE utf8mb4_bin' : '';
  const text = `${dialect === 'mysql' ? 'longtext' : 'text'}${utf8}`;
  return [
    `CREATE TABLE IF NOT EXISTS catalog_namespaces (
      prefix ${prefix} NOT NULL, namespace ${path} NOT NULL, properties ${text} NOT NULL,
      PRIMARY KEY (prefix, namespace))`,
    // `location`: the real path of the entity's location in the warehouse, which a purge checks its directory
    // against (NULL in rows an older server wrote: see addedColumns).
    `CREATE TABLE IF NOT EXISTS catalog_entities (
      prefix ${prefix} NOT NULL, namespace ${path} NOT NULL, name ${name} NOT NULL, kind varchar(8)${utf8} NOT NULL,
      uuid varchar(64)${utf8} NOT NULL, metadata_location ${text} NOT NULL, metadata ${text} NOT NULL,
      location ${text},
      PRIMARY KEY (prefix, namespace, name))`,
    // Replays find a table or view by its UUID, wherever it has been renamed to since. (MySQL has no
    // CREATE INDEX IF NOT EXISTS; losing that race is tolerated like the others.)
    `CREATE INDEX ${dialect === 'mysql' ? '' : 'IF NOT EXISTS '}catalog_entities_uuid ON catalog_entities (uuid)`,
  ];
}

/**
 * Columns added since the tables were first made, as `[table, column, type]`: a database an older server
 * created gets them (see migrate.ts), NULL in its existing rows.
 */
export function addedColumns(dialect: Dialect): [table: string, column: string, type: string][] {
  const utf8 = dialect === 'mysql' ? ' CHARACTER SET utf8mb4 COLLATE utf8mb4_bin' : '';
  return [['catalog_entities', 'location', `${dialect === 'mysql' ? 'longtext' : 'text'}${utf8}`]];
}
