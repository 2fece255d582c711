// Every code block of the READMEs, compiled and run against the packed packages: called by smoke.mjs in its
// fresh npm project (no workspace; its package.json has no "type", so npm's default CommonJS project), after
// the tarballs and SNIPPET_DEPENDENCIES are installed there.
//
// Which blocks: each ```ts and ```js block (also ```cts, ```cjs, ```mts, ```mjs) of the root README.md and of the
// README of every package that is not private. No block is exempt: each is a complete program, imports included.
// The words after the language in the fence's info string (GitHub highlights by the first word only) say how
// it is tested:
//
//   ```ts             an ES module: written as .mts (.mjs for js) and typechecked
//   ```js cjs         CommonJS (`require`): written as .cts (.cjs for js) and typechecked
//   ```ts run         also run: emitted by tsc, run with node; it must exit 0 within RUN_TIMEOUT_MS
//   ```ts decorators  with legacy decorators (`experimentalDecorators`, as NestJS has them): a program of its own
//   ```ts server      also run, as a server: it must listen on process.env.PORT (the runner picks a free port);
//                     once it listens, the runner sends POST /orders twice with one Idempotency-Key, the second
//                     answer must be a replay (idempotent-replayed: true) with the first one's status, then the
//                     runner ends it with SIGTERM
//
// Blocks that run get DATABASE_URL (PG_URL, else PostgreSQL at 127.0.0.1:5432, database test) and REDIS_URL
// (else 127.0.0.1:6379): CI has both services.
//
// Typechecked with tsc --noEmit under each version of TYPESCRIPTS: strict, module and moduleResolution nodenext,
// noUncheckedIndexedAccess, exactOptionalPropertyTypes, checkJs for the js blocks, and no skipLibCheck, so the
// packed .d.ts (and those of the libraries they name) are checked too. The blocks share one program, except a
// block that augments a module or the global scope (`declare global`, `declare module`): it gets a program of
// its own, so that its augmentation cannot make another block compile. A block that fails prints its README
// and line, and tsc's message.
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { v7 } from 'uuid';

const execFileAsync = promisify(execFile);
const RUN_TIMEOUT_MS = 30_000;

/** The TypeScript versions the blocks are checked with: the workspace's own, and the newest of each major after it. */
export const TYPESCRIPTS = [
  { alias: 'typescript', version: null }, // the workspace's pinned version, read from its package.json
  { alias: 'typescript-6', version: '6.0.3' },
  { alias: 'typescript-7', version: '7.0.2' }, // the native compiler (a platform binary package)
];

/** What the blocks import besides @idem/*, at the versions the workspace pins. */
const SNIPPET_DEPENDENCIES = [
  '@types/node',
  'express',
  '@types/express',
  'compression',
  '@types/compression',
  'fastify',
  'hono',
  '@hono/node-server',
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/platform-express',
  'reflect-metadata',
  'rxjs',
  'drizzle-orm',
  'pg',
  '@types/pg',
  'ioredis',
  'redis',
  'prom-client',
  '@opentelemetry/api',
  'iceberg-js',
  'vitest',
  'vite',
];

function workspaceManifests(root) {
  const manifests = [join(root, 'package.json')];
  for (const parent of ['packages', 'apps']) {
    for (const dir of readdirSync(join(root, parent))) {
      const file = join(root, parent, dir, 'package.json');
      if (existsSync(file)) manifests.push(file);
    }
  }
  return manifests.map((file) => JSON.parse(readFileSync(file, 'utf8')));
}

/** The exact version the workspace pins for `name` (a dependency or devDependency of any of its packages). */
function pinnedVersion(root, name) {
  for (const manifest of workspaceManifests(root)) {
    const version = manifest.devDependencies?.[name] ?? manifest.dependencies?.[name];
    if (version !== undefined && /^\d+\.\d+\.\d+$/.test(version)) return version;
  }
  throw new Error(`readme snippets: no exact version of ${name} in the workspace's package.json files`);
}

/** The npm install specs for the smoke project: the TypeScript versions and what the blocks import. */
export function snippetDependencies(root) {
  const typescripts = TYPESCRIPTS.map(({ alias, version }) =>
    version === null ? `${alias}@${pinnedVersion(root, 'typescript')}` : `${alias}@npm:typescript@${version}`,
  );
  return [...typescripts, ...SNIPPET_DEPENDENCIES.map((name) => `${name}@${pinnedVersion(root, name)}`)];
}

const LANGUAGES = {
  ts: { ts: true, cjs: false },
  typescript: { ts: true, cjs: false },
  mts: { ts: true, cjs: false },
  cts: { ts: true, cjs: true },
  js: { ts: false, cjs: false },
  javascript: { ts: false, cjs: false },
  mjs: { ts: false, cjs: false },
  cjs: { ts: false, cjs: true },
};

/** The READMEs whose blocks are tested: the root one and each public package's. */
function readmes(root) {
  const files = [join(root, 'README.md')];
  for (const dir of readdirSync(join(root, 'packages')).sort()) {
    const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'));
    const readme = join(root, 'packages', dir, 'README.md');
    if (!manifest.private && existsSync(readme)) files.push(readme);
  }
  return files;
}

/** The code blocks of one README, with the line of their opening fence. */
function extractBlocks(root, file) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const readme = relative(root, file);
  const slug = readme === 'README.md' ? 'root' : readme.split('/')[1];
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)(.*)$/.exec(lines[i]);
    if (open === null) continue;
    const [, indent, fence, language, rest] = open;
    const closes = (line) =>
      line.trim().length >= fence.length && line.trim() === fence[0].repeat(line.trim().length);
    let end = i + 1;
    while (end < lines.length && !closes(lines[end])) end++;
    if (end >= lines.length) throw new Error(`${readme}:${i + 1}: a code block that never ends`);
    const kind = LANGUAGES[language.toLowerCase()];
    if (kind !== undefined) {
      const words = rest.trim().split(/\s+/).filter(Boolean);
      const unknown = words.filter((word) => !['cjs', 'run', 'server', 'decorators'].includes(word));
      if (unknown.length > 0)
        throw new Error(`${readme}:${i + 1}: unknown words in the fence: ${unknown.join(' ')}`);
      const cjs = kind.cjs || words.includes('cjs');
      const extension = `.${cjs ? 'c' : 'm'}${kind.ts ? 'ts' : 'js'}`;
      const code = lines
        .slice(i + 1, end)
        .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
        .join('\n');
      blocks.push({
        readme,
        line: i + 1,
        file: `${slug}.L${i + 1}${extension}`,
        ts: kind.ts,
        cjs,
        run: words.includes('server') ? 'server' : words.includes('run') ? 'run' : null,
        // Legacy decorators (`experimentalDecorators`, as NestJS has them) need a program of their own.
        decorators: words.includes('decorators'),
        isolated: words.includes('decorators') || /^\s*declare\s+(global|module)\b/m.test(code),
        code: `${code}\n`,
      });
    }
    i = end;
  }
  return blocks;
}

const COMPILER_OPTIONS = {
  strict: true,
  module: 'nodenext',
  moduleResolution: 'nodenext',
  target: 'es2022',
  lib: ['es2023'],
  types: ['node'],
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  skipLibCheck: false,
  allowJs: true,
  checkJs: true,
  noEmit: true,
};

/**
 * Libraries whose own declarations do not compile without skipLibCheck, whoever imports them: their errors are
 * counted and printed as a note, never a failure. Errors anywhere else (a block, an @idem/* declaration, any
 * other library) fail the check.
 */
const BROKEN_DECLARATIONS = {
  'drizzle-orm': 'its own .d.ts do not compile without skipLibCheck, strict or not, imported alone too',
  hono: 'its WebSocket helper .d.ts name DOM types (MessageEvent, CloseEvent, BinaryType): they need "lib": ["DOM"] or skipLibCheck, as its own templates set',
};

/** tsc's diagnostics, one string each (with their continuation lines), and the file each is in. */
function diagnostics(output) {
  const list = [];
  for (const line of output.split('\n')) {
    if (/^\s/.test(line) && list.length > 0) list[list.length - 1].text += `\n${line}`;
    else if (line.trim() !== '')
      list.push({ text: line, file: /^(.+?)\(\d+,\d+\): /.exec(line)?.[1] ?? null });
  }
  return list;
}

/** The package a declaration file belongs to, when it is a library's (under node_modules, not @idem's). */
function libraryOf(file) {
  const at = file?.lastIndexOf('node_modules/') ?? -1;
  if (at < 0) return null;
  const parts = file.slice(at + 'node_modules/'.length).split('/');
  const name = parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  return name.startsWith('@idem/') ? null : name;
}

/** A diagnostic with each block's positions turned into its README's. */
function explain(text, blocks) {
  let explained = text;
  for (const block of blocks) {
    explained = explained.replaceAll(
      new RegExp(`${block.file.replaceAll('.', '\\.')}\\((\\d+),(\\d+)\\)`, 'g'),
      (_, row, column) => `${block.readme}:${block.line + Number(row)}:${column} (${block.file})`,
    );
  }
  return explained;
}

async function typecheck(work, dir, blocks) {
  const isolated = blocks.filter((block) => block.isolated).map((block) => [block]);
  const programs = [blocks.filter((block) => !block.isolated), ...isolated];
  const failures = [];
  const tolerated = new Map(); // 'TypeScript <version>: <library>' -> its distinct diagnostics
  const versions = [];
  for (const { alias } of TYPESCRIPTS) {
    const tsc = join(work, 'node_modules', alias, 'bin', 'tsc');
    const { stdout: versionText } = await execFileAsync('node', [tsc, '--version']);
    const version = versionText.trim().replace(/^Version /, '');
    versions.push(version);
    for (const [index, program] of programs.entries()) {
      if (program.length === 0) continue;
      const config = join(dir, `tsconfig.${index}.json`);
      const files = program.map((block) => block.file);
      const compilerOptions = program.some((block) => block.decorators)
        ? { ...COMPILER_OPTIONS, experimentalDecorators: true }
        : COMPILER_OPTIONS;
      writeFileSync(config, JSON.stringify({ compilerOptions, files }));
      let output = '';
      try {
        await execFileAsync('node', [tsc, '-p', config, '--pretty', 'false'], {
          cwd: dir,
          maxBuffer: 64 << 20,
        });
        continue;
      } catch (error) {
        output = `${error.stdout ?? ''}${error.stderr ?? ''}`.trim() || String(error);
      }
      const wrong = [];
      for (const diagnostic of diagnostics(output)) {
        const library = libraryOf(diagnostic.file);
        if (library !== null && Object.hasOwn(BROKEN_DECLARATIONS, library)) {
          const at = `TypeScript ${version}: ${library}`;
          tolerated.set(at, (tolerated.get(at) ?? new Set()).add(diagnostic.text));
        } else {
          wrong.push(explain(diagnostic.text, blocks));
        }
      }
      if (wrong.length === 0) continue;
      const names = program.map((block) => `${block.readme}:${block.line}`).join(', ');
      failures.push(`TypeScript ${version}, the program of ${names}:\n${wrong.join('\n')}`);
    }
  }
  return { failures, versions, tolerated };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Run one emitted block; resolves to a failure message, or null. */
async function runBlock(block, file, cwd, env) {
  const port = block.run === 'server' ? await freePort() : undefined;
  const child = spawn('node', [file], { cwd, env: { ...env, ...(port && { PORT: String(port) }) } });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timeout'), RUN_TIMEOUT_MS);
  });
  const where = `${block.readme}:${block.line} (${block.file})`;
  try {
    if (block.run === 'run') {
      const end = await Promise.race([exited, timeout]);
      if (end === 'timeout') return `${where} did not exit within ${RUN_TIMEOUT_MS} ms:\n${output}`;
      if (end.code !== 0) return `${where} exited with ${end.code ?? end.signal}:\n${output}`;
      return null;
    }
    // A server: wait until it answers, then one keyed request twice.
    const key = v7();
    const post = () =>
      fetch(`http://127.0.0.1:${port}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ item: 'book' }),
      });
    const deadline = Date.now() + RUN_TIMEOUT_MS;
    let first;
    while (first === undefined) {
      if (child.exitCode !== null || child.signalCode !== null) {
        return `${where} ended before it listened on PORT=${port}:\n${output}`;
      }
      if (Date.now() > deadline)
        return `${where} did not listen on PORT=${port} within ${RUN_TIMEOUT_MS} ms:\n${output}`;
      try {
        first = await post();
      } catch {
        await sleep(100);
      }
    }
    await first.arrayBuffer();
    const again = await post();
    await again.arrayBuffer();
    if (
      again.headers.get('idempotent-replayed') !== 'true' ||
      again.status !== first.status ||
      first.status >= 300
    ) {
      const seen = JSON.stringify(Object.fromEntries(again.headers));
      return `${where}: POST /orders answered ${first.status}, then ${again.status} ${seen}, not a replay:\n${output}`;
    }
    return null;
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  }
}

/**
 * Typecheck every README block under each TypeScript version, then run the ones marked run or server.
 * `work` is the smoke project, with the tarballs and snippetDependencies() installed. Throws on any failure.
 */
export async function checkReadmeSnippets({ root, work }) {
  const blocks = readmes(root).flatMap((file) => extractBlocks(root, file));
  const dir = join(work, 'snippets');
  mkdirSync(dir, { recursive: true });
  for (const block of blocks) writeFileSync(join(dir, block.file), block.code);

  const { failures, versions, tolerated } = await typecheck(work, dir, blocks);
  for (const [at, { size: count }] of tolerated) {
    const library = at.slice(at.indexOf(': ') + 2);
    console.log(
      `readme snippets: note: ${at}: ${count} errors in its declarations; ${BROKEN_DECLARATIONS[library]}`,
    );
  }
  if (failures.length > 0) {
    throw new Error(`README code blocks do not compile:\n\n${failures.join('\n\n')}`);
  }

  // Emit the blocks that run with the workspace's TypeScript (already checked above), then run them one by one.
  const runnable = blocks.filter((block) => block.run !== null);
  const out = join(dir, 'out');
  const emitted = runnable.filter((block) => block.ts);
  if (emitted.length > 0) {
    const config = join(dir, 'tsconfig.emit.json');
    // Legacy decorators where a block has them (they change nothing for a block without any).
    const decorators = emitted.some((block) => block.decorators);
    const compilerOptions = {
      ...COMPILER_OPTIONS,
      noEmit: false,
      noCheck: true,
      outDir: out,
      rootDir: dir,
      ...(decorators ? { experimentalDecorators: true } : {}),
    };
    writeFileSync(config, JSON.stringify({ compilerOptions, files: emitted.map((b) => b.file) }));
    await execFileAsync('node', [join(work, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], {
      cwd: dir,
    });
  }
  mkdirSync(out, { recursive: true });
  const env = {
    ...process.env,
    DATABASE_URL: process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  };
  const runFailures = [];
  for (const block of runnable) {
    const file = join(out, block.file.replace(/\.([cm])ts$/, '.$1js'));
    if (!block.ts) copyFileSync(join(dir, block.file), file);
    const failure = await runBlock(block, file, out, env);
    if (failure !== null) runFailures.push(failure);
  }
  if (runFailures.length > 0) throw new Error(`README quick starts failed:\n\n${runFailures.join('\n\n')}`);

  const files = new Set(blocks.map((block) => block.readme)).size;
  console.log(
    `readme snippets: ${blocks.length} blocks of ${files} READMEs compile under TypeScript ${versions.join(', ')}` +
      ` (strict, nodenext, no skipLibCheck); ${runnable.length} run (${runnable.map((b) => b.file).join(', ')})`,
  );
}
