import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Bench } from 'tinybench';

/** Run named async tasks side by side in one process; return operations per second for each. */
export async function measure(
  tasks: Record<string, () => unknown>,
  options: { timeMs?: number; warmupMs?: number } = {},
): Promise<Record<string, number>> {
  const bench = new Bench({ time: options.timeMs ?? 1_500, warmupTime: options.warmupMs ?? 300 });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  const opsPerSecond: Record<string, number> = {};
  for (const task of bench.tasks) {
    const result = task.result;
    if (result.state === 'errored') throw result.error;
    if (result.state !== 'completed')
      throw new Error(`benchmark ${task.name} did not complete: ${result.state}`);
    opsPerSecond[task.name] = 1_000 / result.period;
  }
  return opsPerSecond;
}

/** The machine line every benchmark prints first, so figures are never quoted without it. */
export function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return `${os.cpus().length} cores (${cpu}), Node ${process.version}, ${os.platform()} ${os.arch()}`;
}

export function printTable(title: string, rows: [string, string][]): void {
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log(`\n${title}`);
  for (const [label, value] of rows) console.log(`  ${label.padEnd(width)}  ${value}`);
}

export const perSecond = (n: number): string => `${Math.round(n).toLocaleString('en-US')} /s`;
export const ratio = (n: number): string => `${n.toFixed(2)}x`;

/** CPU time (user + system) the process `pid` has used so far, from `/proc` (Linux), in clock ticks. */
export function cpuTicks(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of the whole line)
  } catch {
    return undefined;
  }
}

/** A clock tick (`/proc`'s unit, 1/100 s on Linux), in µs. */
export const TICK_US = 10_000;
