import { defineConfig } from 'tsup';
import { baseTsupConfig } from '../../tsup.base.js';

// Private test helper: ESM only.
export default defineConfig({ ...baseTsupConfig, format: ['esm'] });
