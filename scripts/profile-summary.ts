// What a profile from scripts/probe.ts (or `--cpu-prof`) says per request: self time in µs (a .cpuprofile) or
// bytes allocated (a .heapprofile), by package and by function, largest first.
//
//   tsx scripts/profile-summary.ts <profile> <requests> [top]
//
// <requests>: how many requests the profile covers (probe.ts prints it). Comparing two servers' summaries line by
// line (floor against idem) shows where a difference is; one function's share says little on its own.
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
}
interface CpuProfile {
  readonly nodes: readonly { readonly id: number; readonly callFrame: CallFrame }[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}
interface HeapNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

const [file, requests, top = '40'] = process.argv.slice(2);
if (file === undefined || !(Number(requests) > 0) || !(Number(top) > 0)) {
  console.error('usage: tsx scripts/profile-summary.ts <profile> <requests> [top]');
  process.exit(2);
}

/**
 * Where code comes from: a dependency by its package name (the last `node_modules` in its path), one of ours by
 * its folder (its bench and test code apart from the package), Node's by its module (`node:internal/streams`).
 */
function packageOf(url: string): string {
  if (url === '') return '(native)';
  const dependency = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (dependency) return dependency[1] as string;
  const ours = /\/(packages|apps|scripts)\/(?:([^/]+)\/([^/]+)\/)?/.exec(url);
  if (ours) {
    if (ours[1] === 'scripts' || ours[2] === undefined) return 'scripts';
    const name = ours[1] === 'packages' ? `@idem/${ours[2]}` : (ours[2] as string);
    return ours[3] === 'src' || ours[3] === 'dist' ? name : `${name} (${ours[3]})`;
  }
  if (url.startsWith('node:'))
    return url
      .split('/')
      .slice(0, url.startsWith('node:internal/') ? 2 : 1)
      .join('/');
  return url.split('/').slice(-1)[0] as string;
}
/** A function by its name, its package, and its file, line and column. */
const nameOf = (frame: CallFrame) =>
  frame.url === ''
    ? frame.functionName || '(native)'
    : `${frame.functionName || '(anonymous)'} (${packageOf(frame.url)}: ${frame.url.split('/').slice(-1)[0]}:${frame.lineNumber + 1}:${frame.columnNumber + 1})`;

const byPackage = new Map<string, number>();
const byFunction = new Map<string, number>();
const add = (frame: CallFrame, amount: number) => {
  // Natives (the garbage collector, idle, a syscall) are a package of their own, by name.
  const place = frame.url === '' ? frame.functionName : packageOf(frame.url);
  byPackage.set(place, (byPackage.get(place) ?? 0) + amount);
  const name = nameOf(frame);
  byFunction.set(name, (byFunction.get(name) ?? 0) + amount);
};

const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile | { head: HeapNode };
let unit: string;
if ('head' in profile) {
  unit = 'bytes';
  const walk = (node: HeapNode): void => {
    if (node.selfSize > 0) add(node.callFrame, node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
} else {
  unit = 'µs';
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  // timeDeltas[i] is the time before sample i: a sample stands for the time until the next one (the last, until
  // the profile's end), as DevTools counts it.
  let at = profile.startTime;
  const times = profile.timeDeltas.map((delta) => {
    at += delta;
    return at;
  });
  profile.samples.forEach((id, i) => {
    const next = times[i + 1] ?? profile.endTime;
    add(frames.get(id) as CallFrame, Math.max(0, next - (times[i] as number)));
  });
}

const perRequest = (amount: number) => (amount / Number(requests)).toFixed(unit === 'µs' ? 2 : 0).padStart(9);
// Idle is time the server waited, not time it spent: apart from the total.
const idle = byPackage.get('(idle)') ?? 0;
const total = [...byPackage.values()].reduce((sum, amount) => sum + amount, 0) - idle;
console.log(
  `${perRequest(total)} ${unit} per request in all${unit === 'µs' ? ` (and ${perRequest(idle).trim()} µs idle)` : ''}`,
);
for (const [title, table] of [
  ['by package', byPackage],
  ['by function', byFunction],
] as const) {
  console.log(`\n${title}`);
  for (const [name, amount] of [...table].sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
    console.log(`${perRequest(amount)} ${name}`);
  }
}
