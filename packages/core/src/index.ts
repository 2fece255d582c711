export {
  type AnswerStatuses,
  type BeginResult,
  createIdempotency,
  type Idempotency,
  type IdempotencyOptions,
  type IdempotencyOverrides,
  type IdempotentRequest,
  type InFlightStrategy,
} from './coordinator.js';
export {
  type CompletedRecord,
  classifyStoreFailure,
  type Decision,
  decide,
  type InFlightRecord,
  isCompleted,
  type RecordState,
  type ReserveFound,
  recordState,
  type StoreFailure,
} from './decision.js';
export { errorResponse, type FormatError, type WholeResponse } from './error-response.js';
export {
  ErrorCode,
  IdemBodyUnseenError,
  IdemError,
  type IdemErrorOptions,
  IdemInProgressError,
  IdemKeyError,
  IdemKeyInvalidError,
  IdemKeyMissingError,
  IdemKeyReusedError,
  IdemStoreLimitError,
  IdemStoreUnavailableError,
  isIdemError,
  isStoreLimitError,
} from './errors.js';
export {
  hasListeners,
  type IdempotencyEvent,
  type IdempotencyEventListener,
  type IdempotencyEventListeners,
  type StoreOperation,
  safeListener,
} from './events.js';
export type {
  Execution,
  FinishOutcome,
  LeasedExecution,
  RecordContext,
  TransactionalExecution,
  TransactionalOutcome,
  TransactionalReservation,
} from './execution.js';
export {
  defaultFinalizationRule,
  type FinalizationAction,
  type FinalizationRule,
} from './finalization-rules.js';
export {
  canonicalJson,
  computeFingerprint,
  type FingerprintInput,
  type FingerprintOptions,
  type QueryInput,
  UNSEEN_BODY,
} from './fingerprint.js';
export {
  checkListParams,
  checkStatsParams,
  decodeCursor,
  decodeRecordCursor,
  encodeCursor,
  encodeRecordCursor,
  listedBy,
  listedRecord,
  recordStateAt,
  StatsTally,
} from './inspection.js';
export { type KeyFormat, type KeyValidator, parseIdempotencyKey } from './key-format.js';
export {
  type ExecutionState,
  LEASED,
  type LeasedState,
  type LifecycleTrigger,
  TRANSACTIONAL,
  type TransactionalState,
  type Transition,
} from './lifecycle.js';
export {
  type PurgeOnceOptions,
  type PurgeSchedulerOptions,
  purgeExpiredInBatches,
  startPurgeScheduler,
} from './purge-scheduler.js';
export { decideReservation, newReservation } from './reservation.js';
export {
  BODY_OMITTED_HEADER,
  type CapturedResponse,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_REPLAY_HEADERS,
  HEADERS_OMITTED_HEADER,
  type HeaderValue,
  NEVER_STORED_HEADERS,
  type OmittedParts,
  REPLAYED_HEADER,
  type ReplayResponse,
  type StoreResponseOptions,
  smallerResponses,
  toReplayResponse,
  toStoredResponse,
} from './response.js';
export {
  type Clock,
  type FinalizeParams,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListedRecord,
  type ListedResponse,
  type ListParams,
  MAX_LIST_LIMIT,
  type MaybePromise,
  type OwnedRecordRef,
  type PurgeParams,
  type RecordPage,
  type RecordRef,
  type RecordStateAt,
  type RenewLeaseParams,
  type ReplayCache,
  type ReserveParams,
  type ReserveResult,
  type StatsParams,
  type StoredResponse,
  type StoreLimits,
  type StoreStats,
  systemClock,
  type TransactionalStore,
} from './types.js';
export {
  type KeyValidation,
  MAX_TOKEN_LENGTH,
  type UuidV7Options,
  validateToken,
  validateUuidV7,
} from './uuidv7.js';
