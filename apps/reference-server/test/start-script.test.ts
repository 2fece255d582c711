import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';

// `pnpm start` builds the workspace packages the server runs on and nothing else (turbo's `--only`: the
// filtered packages, in dependency order; `@idem/reference-server...` built its test-only devDependencies'
// graph too, 11 packages instead of 6), and prints one line per package as it goes (`--output-logs=hash-only`).
// The list is kept in step with the server's dependencies here.

const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8'));

test('the root start script builds exactly the server and the @idem packages it depends on', () => {
  const server = read('../package.json');
  const root = read('../../../package.json');
  const wanted = [
    '@idem/reference-server',
    ...Object.keys(server.dependencies).filter((name) => name.startsWith('@idem/')),
  ].sort();
  const start: string = root.scripts.start;
  const build = start.split('&&')[0] as string;
  expect(build).toMatch(/^turbo run build --only /);
  expect(build).toContain('--output-logs=hash-only');
  const filtered = [...build.matchAll(/--filter=(\S+)/g)].map((match) => match[1]).sort();
  expect(filtered).toEqual(wanted);
});

test('every @idem package the server imports is a dependency of it (none only reached through a devDependency)', () => {
  const server = read('../package.json');
  const imported = new Set(
    execFileSync('grep', ['-rhoE', "from '@idem/[a-z-]+", 'src'], {
      cwd: new URL('..', import.meta.url),
      encoding: 'utf8',
    })
      .split('\n')
      .filter(Boolean)
      .map((line) => line.replace("from '", '')),
  );
  expect([...imported].sort()).toEqual(
    Object.keys(server.dependencies)
      .filter((name) => name.startsWith('@idem/'))
      .sort(),
  );
});
