import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';
import { baseTsupConfig } from '../../tsup.base.js';

const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
const define = { __IDEM_CLI_VERSION__: JSON.stringify(version) };

// The library (index) in both formats; the `idem` binary as one ESM file with its shebang.
export default defineConfig([
  { ...baseTsupConfig, define },
  {
    ...baseTsupConfig,
    define,
    entry: ['src/bin.ts'],
    format: ['esm'],
    dts: false,
    clean: false,
    banner: { js: '#!/usr/bin/env node' },
  },
]);
