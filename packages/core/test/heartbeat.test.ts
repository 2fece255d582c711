import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HeartbeatScheduler, type Renewable } from '../src/heartbeat.js';

/** An execution that renews (sets renewedAtMs) on each beat, and may leave the scheduler while it beats. */
function execution(scheduler: HeartbeatScheduler, leaveOnBeat = false) {
  const beats: number[] = [];
  const e: Renewable & { renewedAtMs: number; beats: number[] } = {
    renewedAtMs: performance.now(),
    heartbeatSlot: -1,
    beats,
    beat() {
      beats.push(performance.now());
      e.renewedAtMs = performance.now();
      if (leaveOnBeat) scheduler.remove(e);
    },
  };
  return e;
}

describe('HeartbeatScheduler', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('holds each execution once, removes any of them (twice is nothing), and renews only those it holds', () => {
    const scheduler = new HeartbeatScheduler(100);
    const [a, b, c, d] = [1, 2, 3, 4].map(() => execution(scheduler));
    for (const e of [a, b, c, d]) scheduler.add(e as Renewable);
    scheduler.add(a as Renewable); // held already
    expect(scheduler.size).toBe(4);
    scheduler.remove(b as Renewable); // from the middle: d takes its slot
    scheduler.remove(b as Renewable);
    scheduler.remove(d as Renewable); // then the one that moved
    expect(scheduler.size).toBe(2);
    vi.advanceTimersByTime(150); // ticks at 50, 100, 150: due from 100 on
    expect(a?.beats.length).toBeGreaterThan(0);
    expect(c?.beats.length).toBeGreaterThan(0);
    expect(b?.beats).toEqual([]);
    expect(d?.beats).toEqual([]);
  });

  it('beats every due execution when some leave during their beat', () => {
    const scheduler = new HeartbeatScheduler(100);
    const all = Array.from({ length: 6 }, (_, i) => execution(scheduler, i % 2 === 0));
    for (const e of all) scheduler.add(e);
    vi.advanceTimersByTime(100);
    expect(all.map((e) => e.beats.length)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(scheduler.size).toBe(3);
    for (const e of all) scheduler.remove(e);
    expect(scheduler.size).toBe(0);
  });
});
