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

  it('keeps every slot consistent through random adds and removes', () => {
    const scheduler = new HeartbeatScheduler(1_000);
    const all = Array.from({ length: 200 }, () => execution(scheduler));
    const inside = new Set<Renewable>();
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let step = 0; step < 20_000; step++) {
      const e = all[Math.floor(random() * all.length)] as Renewable;
      if (random() < 0.5) {
        scheduler.add(e);
        inside.add(e);
      } else {
        scheduler.remove(e);
        inside.delete(e);
      }
      expect(scheduler.size).toBe(inside.size);
    }
    for (const e of all) expect(e.heartbeatSlot === -1).toBe(!inside.has(e));
    const slots = [...inside].map((e) => e.heartbeatSlot).sort((a, b) => a - b);
    expect(slots).toEqual(slots.map((_, i) => i));
  });
});
