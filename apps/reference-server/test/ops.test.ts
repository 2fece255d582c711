import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { type ObservedNode, startObservedNode } from './support/observed.js';
import { call, newKey } from './support/server.js';

const ops = fileURLToPath(new URL('../../../ops/', import.meta.url));
const ruleFiles = readdirSync(ops)
  .filter((name) => name.endsWith('.yml'))
  .map((name) => join(ops, name));

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
}
const rules: Rule[] = ruleFiles.flatMap((file) =>
  (parse(readFileSync(file, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules),
);
const dashboard = JSON.parse(readFileSync(join(ops, 'grafana-dashboard.json'), 'utf8')) as {
  panels: { id: number; type: string; targets?: { expr: string }[] }[];
};

/** The metric names a PromQL expression reads (identifiers directly followed by `{` or `[`). */
function seriesIn(expr: string): string[] {
  return [...expr.matchAll(/\b([a-z_:][a-z0-9_:]*)\s*(?=[{[])/g)].map((m) => m[1] as string);
}

function promtool(): boolean {
  const found = spawnSync('promtool', ['--version']).status === 0;
  if (!found && process.env.CI === 'true')
    throw new Error('promtool is missing under CI=true (.ci/services.sh installs it)');
  if (!found)
    console.warn('skipping the promtool checks: promtool is not installed (apt-get install prometheus)');
  return found;
}

describe('ops/: alert rules and dashboard over the series the server exposes', () => {
  let node: ObservedNode;
  let exposed: Set<string>;
  beforeAll(async () => {
    node = await startObservedNode();
    await call(node.url, 'POST', '/v1/namespaces', { key: newKey(), body: { namespace: ['ops'] } });
    const text = await (await fetch(`${node.url}/metrics`)).text();
    exposed = new Set<string>();
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exposed.add(name as string);
      if (type === 'histogram')
        for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(`${name}${suffix}`);
    }
  });
  afterAll(async () => node.close());

  test('every series an alert or a panel reads is one /metrics serves', () => {
    const read = [
      ...rules.flatMap((rule) => seriesIn(rule.expr)),
      ...dashboard.panels.flatMap((panel) =>
        (panel.targets ?? []).flatMap((target) => seriesIn(target.expr)),
      ),
    ];
    expect(read.length).toBeGreaterThan(20);
    expect([...new Set(read)].filter((name) => !exposed.has(name))).toEqual([]);
  });

  test('the thresholds: errors > 100/min critical; p99 > 500 ms, p95 > 200 ms, misses > 50 %, active keys > 1 M warnings', () => {
    const byName = Object.fromEntries(rules.map((rule) => [rule.alert, rule]));
    expect(byName.IdempotencyErrorsHigh).toMatchObject({ labels: { severity: 'critical' } });
    expect(byName.IdempotencyErrorsHigh?.expr).toMatch(/idempotency_errors_total\[\w+\]\)\) \* 60 > 100$/);
    expect(byName.IdempotencyLatencyP99High?.expr).toMatch(/^histogram_quantile\(0\.99, .*\) > 0\.5$/);
    expect(byName.IdempotencyLatencyP95High?.expr).toMatch(/^histogram_quantile\(0\.95, .*\) > 0\.2$/);
    expect(byName.IdempotencyCacheMissRatioHigh?.expr.trim()).toMatch(/> 0\.5$/);
    expect(byName.IdempotencyActiveKeysHigh?.expr).toBe('sum(idempotency_active_keys_count) > 1e6');
    for (const name of [
      'IdempotencyLatencyP99High',
      'IdempotencyLatencyP95High',
      'IdempotencyCacheMissRatioHigh',
      'IdempotencyActiveKeysHigh',
    ]) {
      expect(byName[name]?.labels.severity, name).toBe('warning');
    }
  });

  test('the dashboard is importable: unique panel ids, a query on every graph, a Prometheus data source variable', () => {
    const ids = dashboard.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, String(panel.id)).toBeGreaterThan(0);
    }
    expect(readFileSync(join(ops, 'grafana-dashboard.json'), 'utf8')).toContain('"query": "prometheus"');
  });

  test.runIf(promtool())(
    'promtool: the rules are valid and pass their unit tests; a broken rule fails the check',
    () => {
      execFileSync('promtool', ['check', 'rules', ...ruleFiles], { stdio: 'pipe' });
      execFileSync('promtool', ['test', 'rules', join(ops, 'tests', 'idempotency-alerts.test.yml')], {
        stdio: 'pipe',
      });
      const dir = mkdtempSync(join(tmpdir(), 'idem-rules-'));
      try {
        const broken = join(dir, 'broken.yml');
        const text = readFileSync(ruleFiles[0] as string, 'utf8').replace('> 100', '> > 100');
        writeFileSync(broken, text);
        const check = spawnSync('promtool', ['check', 'rules', broken]);
        expect(check.status).not.toBe(0);
        expect(String(check.stdout) + String(check.stderr)).toMatch(/parse error|unexpected/i);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
