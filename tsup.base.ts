import type { Options } from 'tsup';

/** The one build shape of every publishable package: ESM + CJS, each with its own declarations. */
export const baseTsupConfig = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
  platform: 'node',
  splitting: false,
  treeshake: true,
  // Relative to each package (packages/<name>): declarations resolve @idem/* as published, not from sources.
  tsconfig: '../../tsconfig.build.json',
} satisfies Options;
