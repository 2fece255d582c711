import { defineConfig } from 'tsup';
import { baseTsupConfig } from '../../tsup.base.js';

export default defineConfig(baseTsupConfig);
