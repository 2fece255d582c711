import { defineConfig } from 'tsup';
import { baseTsupConfig } from '../../tsup.base.js';

// An application, not a library: one ESM entry that `pnpm start` runs.
export default defineConfig({ ...baseTsupConfig, entry: ['src/main.ts'], format: ['esm'], dts: false });
