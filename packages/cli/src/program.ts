import type { RecordStateAt } from '@idem/core';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { CliError, ExitCode } from './cli-error.js';
import * as commands from './commands.js';
import { describeError } from './describe-error.js';
import { EscapeError, readValue } from './escape.js';
import { type OpenedStore, openStore, usableOption } from './open-store.js';
import { colorsFor, type Io } from './output.js';
import { maskerOf, parseStoreUrl, type StoreUrl } from './store-url.js';

declare const __IDEM_CLI_VERSION__: string | undefined;
// Set by the build (tsup.config.ts) from package.json.
const VERSION = typeof __IDEM_CLI_VERSION__ === 'string' ? __IDEM_CLI_VERSION__ : '0.0.0-source';

/** The environment variable a URL is read from when none is given: keeps passwords out of shell history. */
export const URL_VARIABLE = 'IDEM_STORE_URL';

const positiveInt =
  (name: string, max = Number.MAX_SAFE_INTEGER) =>
  (text: string) => {
    const value = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(value) || value < 1 || value > max)
      throw new InvalidArgumentError(`${name} must be a whole number from 1 to ${max}`);
    return value;
  };

const wholeMs = (text: string) => {
  const value = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value)) throw new InvalidArgumentError('must be a whole number of milliseconds');
  return value;
};

interface StoreOptions {
  json?: boolean;
  table?: string;
  prefix?: string;
  timeout: number;
  /** `--scope` and `--key`, of the commands that take them. */
  scope?: string;
  key?: string;
}

/** A scope or key from the command line: as `idem` shows it (escapes read back), or raw. */
function readOption(option: string, text: string): string {
  try {
    return readValue(text);
  } catch (error) {
    if (error instanceof EscapeError) throw new CliError(`${option}: ${error.message}`, ExitCode.Usage);
    throw error;
  }
}

/** The options with their `--scope` and `--key` read back ({@link readOption}). */
const readValues = <O extends StoreOptions>(options: O): O => ({
  ...options,
  ...(options.scope === undefined ? {} : { scope: readOption('--scope', options.scope) }),
  ...(options.key === undefined ? {} : { key: readOption('--key', options.key) }),
});

/** How a scope or key is written on the command line, for every command's help. */
const VALUE_HELP =
  'A scope or key is written as idem shows it: \\\\ for a backslash, \\n \\r \\t \\xHH \\uHHHH for a control\n' +
  "character (or the character itself), '' for the empty scope. --json shows them as stored.";

/** The options every store command takes. */
function storeCommand(program: Command, name: string, summary: string): Command {
  return program
    .command(name)
    .summary(summary)
    .argument(
      '[url]',
      `the store: ${'postgres://…, mysql://…, sqlite:<file>, redis://…, redis+cluster://…'} (default: $${URL_VARIABLE})`,
    )
    .option('--json', 'print JSON for scripts instead of text')
    .option('--table <name>', 'the SQL table of records (default: idem_records)')
    .option('--prefix <prefix>', "the Redis key prefix (default: 'idem:')")
    .addOption(
      new Option('--timeout <ms>', 'how long connecting and each call may take')
        .default(10_000)
        // The longest a Node timer waits: beyond it, Node warns and fires after 1 ms.
        .argParser(positiveInt('--timeout', 2_147_483_647)),
    );
}

/**
 * Run the `idem` command with `argv` (the arguments after the program name) and return its exit code: one
 * line on stderr for anything that went wrong, never a stack trace; every message masks the URL's password.
 */
export async function run(argv: readonly string[], io: Io): Promise<ExitCode> {
  const mask = maskerOf([...argv, io.env[URL_VARIABLE] ?? '']);
  // stdout carries the records as stored: a password that also occurs in them is data there, and masking it
  // would corrupt the JSON (a body of 1234 bytes under the password 1234). Every message goes to stderr, masked.
  const out = (text: string) => void io.stdout.write(text);
  const err = (text: string) => void io.stderr.write(mask(text));
  // Read before parsing, since commander's own errors are coloured too; declared as an option of the program, so
  // commander takes it before or after the command.
  const end = argv.indexOf('--');
  const noColor = (end === -1 ? argv : argv.slice(0, end)).includes('--no-color');
  const colors = colorsFor(io, 'stdout', noColor);
  const errColors = colorsFor(io, 'stderr', noColor);

  let target: StoreUrl | undefined;
  let table = 'idem_records';
  let exitCode: ExitCode = ExitCode.Ok;

  /** The URL given, or the environment's. */
  const urlText = (url: string | undefined): string => {
    const text = url ?? io.env[URL_VARIABLE];
    if (text === undefined || text === '')
      throw new CliError(`name the store: idem <command> <url>, or set ${URL_VARIABLE}`, ExitCode.Usage);
    return text;
  };

  /** Open the store of `url`, run `body` on it, close it: the life of every command. */
  const withStore =
    <O extends StoreOptions>(
      body: (ctx: commands.Context, options: O) => Promise<ExitCode>,
      openOptions: { createFile?: boolean; connect?: (options: O) => boolean } = {},
    ) =>
    async (url: string | undefined, given: O) => {
      // Before connecting: a scope or key that cannot be read is the operator's to fix, whatever the store does.
      const options = readValues(given);
      target = parseStoreUrl(urlText(url));
      table = options.table ?? table;
      let opened: OpenedStore | undefined;
      try {
        opened = await openStore(target, {
          timeoutMs: options.timeout,
          ...(options.table === undefined ? {} : { table: options.table }),
          ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
          ...(openOptions.createFile === undefined ? {} : { createFile: openOptions.createFile }),
        });
        exitCode = await body(
          { opened, nowMs: Date.now(), json: options.json === true, io, colors, errColors, out, err },
          options,
        );
      } finally {
        await opened?.close().catch(() => {});
      }
    };

  const program = new Command('idem')
    .description('Operate the records of an idem store: migrate, inspect, list, stats, forget, purge.')
    .version(VERSION, '-V, --version')
    .option('--no-color', 'never colour the output (as NO_COLOR=1 does)')
    .exitOverride()
    .showHelpAfterError('(idem <command> --help for its options)')
    .configureOutput({
      writeOut: (text) => void io.stdout.write(mask(text)),
      writeErr: err,
      outputError: (text, write) => write(errColors.red(text)),
    })
    .addHelpText(
      'after',
      `\nThe store URL can come from $${URL_VARIABLE} instead (no password in your shell history).\n` +
        'Exit codes: 0 done, 1 the store failed, 2 usage, 3 no such record, 4 refused.',
    );

  storeCommand(program, 'migrate', 'create or upgrade the records table (SQL stores)')
    .option('--dry-run', 'print the SQL without connecting')
    .action(async (url: string | undefined, options: StoreOptions & { dryRun?: boolean }) => {
      if (options.dryRun === true) {
        target = parseStoreUrl(urlText(url));
        if (target.kind === 'redis' || target.kind === 'redis-cluster') {
          out(options.json ? `${JSON.stringify({ statements: [] })}\n` : '-- Redis needs no schema\n');
          return;
        }
        const { schemaStatements } = await import('@idem/store-sql');
        const dialect = target.kind;
        const statements = usableOption(() => schemaStatements(dialect, options.table));
        out(
          options.json
            ? `${JSON.stringify({ statements })}\n`
            : `${statements.map((s) => (s.endsWith(';') ? s : `${s};`)).join('\n')}\n`,
        );
        return;
      }
      await withStore(commands.migrate, { createFile: true })(url, options);
    });

  const recordOptions = (command: Command) =>
    command
      .requiredOption('-k, --key <key>', 'the Idempotency-Key (a UUIDv7 in any case, quoted or not)')
      .option(
        '-s, --scope <scope>',
        "the key's scope, as idem shows it ('' is the coordinator's default)",
        '',
      )
      .addHelpText('after', `\n${VALUE_HELP}`);

  recordOptions(
    storeCommand(program, 'inspect', 'show one record: state, times, lease, owner, status, headers'),
  )
    .option('--body', 'print the stored body too')
    .action(
      withStore((ctx, options: StoreOptions & { key: string; scope: string; body?: boolean }) =>
        commands.inspect(ctx, { ...options, body: options.body === true }),
      ),
    );

  recordOptions(storeCommand(program, 'forget', 'delete one record, so that its retry runs again'))
    .option('-y, --yes', 'do not ask for confirmation')
    .option('--force', 'forget a record that is still in flight')
    .action(
      withStore(
        (ctx, options: StoreOptions & { key: string; scope: string; yes?: boolean; force?: boolean }) =>
          commands.forget(ctx, { ...options, yes: options.yes === true, force: options.force === true }),
      ),
    );

  storeCommand(program, 'list', 'list records, oldest scope and key first')
    .option('-s, --scope <scope>', 'only this scope, as idem shows it')
    .addHelpText('after', `\n${VALUE_HELP}`)
    .addOption(
      new Option('--state <state>', 'only records in this state').choices([
        'in-flight',
        'completed',
        'expired',
      ]),
    )
    .addOption(
      new Option('-n, --limit <n>', 'the most records to show').default(50).argParser(positiveInt('--limit')),
    )
    .option('--cursor <cursor>', 'go on from where an earlier list stopped')
    .action(
      withStore(
        (
          ctx,
          options: StoreOptions & { scope?: string; state?: RecordStateAt; limit: number; cursor?: string },
        ) => commands.list(ctx, options),
      ),
    );

  storeCommand(program, 'stats', 'count records by state; the oldest in-flight record')
    .option('-s, --scope <scope>', 'only this scope, as idem shows it')
    .addHelpText('after', `\n${VALUE_HELP}`)
    .action(withStore((ctx, options: StoreOptions & { scope?: string }) => commands.stats(ctx, options)));

  storeCommand(program, 'purge', 'delete expired records, in batches')
    .addOption(
      new Option('--batch <n>', 'records deleted per statement')
        .default(1000)
        .argParser(positiveInt('--batch')),
    )
    .addOption(
      new Option('--grace <ms>', 'only records expired at least this long ago (clock skew between nodes)')
        .default(60_000)
        .argParser(wholeMs),
    )
    .action(
      withStore((ctx, options: StoreOptions & { batch: number; grace: number }) =>
        commands.purge(ctx, { batch: options.batch, graceMs: options.grace }),
      ),
    );

  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are not errors; everything else commander refuses is a usage error (already printed).
      return error.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    }
    const failure = describeError(error, target, table);
    err(`${errColors.red('idem:')} ${failure.message}\n`);
    if (io.env.IDEM_DEBUG === '1' && error instanceof Error && error.stack !== undefined)
      err(`${error.stack}\n`);
    return failure.exitCode;
  }
}
