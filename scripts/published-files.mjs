// What a package ships points only at what it ships: for every public package, the files `npm pack` would put
// in its tarball are listed, and then every source map's `sources`, every relative link in its README and every
// path in its `exports` must name one of them. Run after `pnpm build`.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const problems = [];

for (const dir of readdirSync(join(root, 'packages'))) {
  const base = join(root, 'packages', dir);
  const manifest = JSON.parse(readFileSync(join(base, 'package.json'), 'utf8'));
  if (manifest.private) continue;
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: base }).toString(),
  );
  const shipped = new Set(packed.files.map((file) => normalize(file.path)));
  const missing = (from, target, what) => {
    const path = normalize(join(dirname(from), target));
    if (!shipped.has(path))
      problems.push(`${manifest.name}: ${from} ${what} ${target}, which is not shipped`);
  };

  for (const file of shipped) {
    if (!file.endsWith('.map')) continue;
    const map = JSON.parse(readFileSync(join(base, file), 'utf8'));
    for (const source of map.sources) missing(file, source, 'maps to');
  }

  // Relative links (not http(s), mailto or in-page anchors) resolve inside the tarball.
  const readme = readFileSync(join(base, 'README.md'), 'utf8');
  for (const [, target] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^(?:[a-z]+:|#)/i.test(target)) continue;
    missing('README.md', target.split('#')[0], 'links to');
  }

  const targets = (value) =>
    typeof value === 'string' ? [value] : Object.values(value ?? {}).flatMap((v) => targets(v));
  for (const target of targets(manifest.exports)) missing('package.json', target, 'exports');
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  'published files: every source map, README link and export of every public package names a shipped file',
);
