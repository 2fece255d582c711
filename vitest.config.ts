import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = fileURLToPath(new URL('.', import.meta.url));
const dirsOf = (parent: string) =>
  readdirSync(new URL(`./${parent}`, import.meta.url), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
const packageDirs = dirsOf('packages');
const projectDirs = [
  ...packageDirs.map((dir) => `packages/${dir}`),
  ...dirsOf('apps').map((dir) => `apps/${dir}`),
];

export default defineConfig({
  resolve: {
    // Tests import every @idem package by name, as a user would, but run against its sources: no build step
    // between an edit and a test run. The published build is checked separately (publint, attw, smoke test).
    alias: packageDirs.map((dir) => ({
      find: new RegExp(`^@idem/${dir}$`),
      replacement: `${root}packages/${dir}/src/index.ts`,
    })),
  },
  test: {
    // CI asks for a machine-readable report too (pnpm intercepts --reporter on the command line).
    reporters: process.env.IDEM_TEST_REPORT
      ? ['default', ['json', { outputFile: process.env.IDEM_TEST_REPORT }]]
      : ['default'],
    // Database suites on 2 cores (PGlite above all) need room; a hang still fails.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      ...projectDirs.map((dir) => ({
        extends: true as const,
        test: {
          name: dir.split('/')[1] as string,
          root: dir,
          include: ['test/**/*.test.ts'],
          // A package whose suites need a service started first (the Redis Cluster) says so in this file.
          globalSetup: existsSync(`${root}${dir}/test/global-setup.ts`) ? ['test/global-setup.ts'] : [],
        },
      })),
      // Every package's type tests (test/**/*.test-d.ts) in one project: vitest announces its experimental
      // type checker once per project that turns it on.
      {
        extends: true as const,
        test: {
          name: 'types',
          root: '.',
          include: [],
          typecheck: {
            enabled: true,
            include: ['packages/*/test/**/*.test-d.ts', 'apps/*/test/**/*.test-d.ts'],
            tsconfig: './tsconfig.types.json',
          },
        },
      },
    ],
  },
});
