/**
 * The two lifecycles of an execution, as state machines. Every change of an execution's state is one of the
 * named transitions below, taken through {@link step}; anything else is a bug and throws. design.md
 * shows the same tables, and `test/lifecycle.test.ts` walks every transition.
 */

/**
 * A leased execution (`reserveIn: 'begin'`): `begin` reserved the key under a lease, which the heartbeat
 * renews while the handler runs.
 *
 * - `reserved`: the lease is held (and renewed).
 * - `lost`: the heartbeat found another owner; the host's `signal` is aborted. What it answers is offered to the
 *   store all the same, owner-fenced, so the store says whether it was really lost.
 * - `written`: `finalizeWith` wrote the record in the host's transaction, whose commit is not known yet.
 * - `write-failed`: `finalizeWith` threw: nothing was written.
 * - `settled`: done; every later call is `already-settled`.
 *
 * A `finalizeWith` of a status the rule releases writes nothing and changes no state: the answer that goes out
 * releases the key.
 */
export type LeasedState = 'reserved' | 'lost' | 'written' | 'write-failed' | 'settled';

/**
 * A transactional execution (`reserveIn: 'transaction'`): the host reserves the key inside its own database
 * transaction, does its work and finalizes there.
 *
 * - `pending`: the key is checked and the fingerprint taken; nothing is reserved.
 * - `reserved`: `reserveWith` reserved the key in the host's transaction (no lease: the row lock holds it).
 * - `written`, `write-failed`, `settled`: as in the leased lifecycle.
 *
 * A `reserveWith` whose store fails changes no state: the fault is thrown, and the host's transaction fails
 * with it.
 */
export type TransactionalState = 'pending' | 'reserved' | 'written' | 'write-failed' | 'settled';

export type ExecutionState = LeasedState | TransactionalState;

/** What moves an execution: one of the host's calls, or the heartbeat. */
export type LifecycleTrigger = 'reserveWith' | 'finalizeWith' | 'finish' | 'abort' | 'hold' | 'heartbeat';

export interface Transition<State extends string> {
  readonly from: readonly State[];
  readonly on: LifecycleTrigger;
  readonly to: State;
  /** What the transition does, as design.md says it. */
  readonly does: string;
}

/** The answer is done with: the key's fate is up to the stored record, or the key is free again. */
const finishes = {
  finalize: {
    on: 'finish',
    does: 'the rule stores the status: finalize the answer, or as much of it as the store can hold; release the key when not even the status fits',
  },
  release: { on: 'finish', does: 'the rule releases the status: release the key' },
  abort: { on: 'abort', does: 'the handler threw or the client left: release the key' },
  write: {
    on: 'finalizeWith',
    does: "the record is written in the host's transaction (as much of it as the store can hold); its commit is known only from the answer that goes out",
  },
} as const;

/** How a write in the host's transaction ends, the same in both lifecycles. */
const afterWrite = {
  'lost-at-write': {
    from: ['written'],
    on: 'finalizeWith',
    to: 'settled',
    does: 'another request owns the key now: nothing is written, the host rolls back',
  },
  'write-threw': {
    from: ['written'],
    on: 'finalizeWith',
    to: 'write-failed',
    does: "the transactional finalize threw: nothing is written (the host's transaction fails)",
  },
  commit: {
    from: ['written'],
    on: 'finish',
    to: 'settled',
    does: 'the answer that goes out has the written status: the transaction committed it, the record is durable',
  },
  'roll-back': {
    from: ['written', 'write-failed'],
    on: 'finish',
    to: 'settled',
    does: 'another answer after the write, or any answer after a write that threw: the transaction failed, so release the key (owner-fenced: a commit that went through stays, and a reservation its rollback took is gone already)',
  },
  'abort-after-write': {
    from: ['written', 'write-failed'],
    on: 'abort',
    to: 'settled',
    does: 'an abort after the write: as roll-back',
  },
} as const;

/** The leased lifecycle's transitions, by name. */
export const LEASED = {
  finalize: { from: ['reserved', 'lost'], to: 'settled', ...finishes.finalize },
  release: { from: ['reserved', 'lost'], to: 'settled', ...finishes.release },
  abort: { from: ['reserved', 'lost'], to: 'settled', ...finishes.abort },
  'lose-lease': {
    from: ['reserved'],
    on: 'heartbeat',
    to: 'lost',
    does: "the heartbeat's renewal found another owner: stop renewing, abort the host's signal",
  },
  write: { from: ['reserved', 'lost'], to: 'written', ...finishes.write },
  ...afterWrite,
  hold: {
    from: ['reserved', 'lost', 'written', 'write-failed'],
    on: 'hold',
    to: 'settled',
    does: "the work's outcome is unknown (its commit did not answer): store nothing, release nothing, stop renewing; the key stays in flight until its lease lapses",
  },
} as const satisfies Record<string, Transition<LeasedState>>;

/** The transactional lifecycle's transitions, by name. */
export const TRANSACTIONAL = {
  reserve: {
    from: ['pending'],
    on: 'reserveWith',
    to: 'reserved',
    does: "the key is reserved in the host's transaction (fresh, or a lapsed lease taken over): do the work",
  },
  'answer-instead': {
    from: ['pending'],
    on: 'reserveWith',
    to: 'settled',
    does: 'the key is answered already (a replay) or refused (used for another request, in flight elsewhere, too large for the store): send that, write nothing',
  },
  'never-reserved': {
    from: ['pending'],
    on: 'finish',
    to: 'settled',
    does: 'the host answered before reserving (a refusal before its transaction): nothing to do',
  },
  'abort-pending': {
    from: ['pending'],
    on: 'abort',
    to: 'settled',
    does: 'nothing was reserved: nothing to do',
  },
  write: { from: ['reserved'], to: 'written', ...finishes.write },
  'release-in-transaction': {
    from: ['reserved'],
    on: 'finalizeWith',
    to: 'settled',
    does: "the rule releases the status: the reservation is released in the host's transaction, so the retry runs",
  },
  'store-after-rollback': {
    from: ['reserved'],
    on: 'finish',
    to: 'settled',
    does: 'an answer the rule stores, never written in the transaction (it rolled back, a deterministic refusal such as a 409): store it outside, reserving the key afresh if the rollback took the reservation',
  },
  release: { ...finishes.release, from: ['reserved'], to: 'settled' },
  abort: { ...finishes.abort, from: ['reserved'], to: 'settled' },
  ...afterWrite,
} as const satisfies Record<string, Transition<TransactionalState>>;

export type LeasedTransition = keyof typeof LEASED;
export type TransactionalTransition = keyof typeof TRANSACTIONAL;

/** Either lifecycle's table: what {@link step} reads. */
export type TransitionTable = Readonly<Record<string, Transition<ExecutionState>>>;

/**
 * The state after the transition `name` from `state`. A transition the table does not have, or one that does
 * not start from `state`, is a bug in the execution, and throws.
 */
export function step(table: TransitionTable, state: ExecutionState, name: string): ExecutionState {
  const transition = table[name];
  if (transition === undefined || !transition.from.includes(state)) {
    throw new Error(`idem: no transition "${name}" from the state "${state}"`);
  }
  return transition.to;
}
