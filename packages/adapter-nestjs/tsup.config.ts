import { defineConfig } from 'tsup';
import { baseTsupConfig } from '../../tsup.base.js';

// Nest's decorators are the legacy ones: built with a tsconfig that says so.
export default defineConfig({ ...baseTsupConfig, tsconfig: './tsconfig.build.json' });
