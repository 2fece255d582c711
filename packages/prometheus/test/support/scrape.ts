import { parseExposition, type Sample } from '@idem/adapter-suite';
import type { Registry } from 'prom-client';

/** Scrape a registry as Prometheus would, and parse what it answered. */
export async function scrape(registry: Registry): Promise<Sample[]> {
  return parseExposition(await registry.metrics());
}
