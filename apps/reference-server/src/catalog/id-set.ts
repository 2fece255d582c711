/** The ids of a metadata list (schemas, specs, sort orders, view versions) as a set, and the highest of them. */
export interface IdSet {
  readonly ids: Set<number>;
  /** The highest id, or the floor the list starts above; the next id added is `max + 1`. */
  max: number;
}

/**
 * The ids (`key` of each item) of `list` and their maximum (at least `floor`), in one pass. Never
 * `Math.max(...list)`: its arguments go on the stack (a RangeError past ~120k items), and recomputing it per
 * update made a commit quadratic.
 */
export function idsOf(list: readonly Record<string, unknown>[], key: string, floor: number): IdSet {
  const ids = new Set<number>();
  let max = floor;
  for (const item of list) {
    const id = Number(item[key]);
    ids.add(id);
    if (id > max) max = id;
  }
  return { ids, max };
}
