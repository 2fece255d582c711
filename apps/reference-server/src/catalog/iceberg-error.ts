/** An error the catalog answers with, as an Iceberg `IcebergErrorResponse`. */
export class IcebergError extends Error {
  constructor(
    readonly code: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }

  toJSON() {
    return { error: { message: this.message, type: this.type, code: this.code } };
  }
}

export const badRequest = (message: string) => new IcebergError(400, 'BadRequestException', message);
export const noSuchNamespace = (name: string) =>
  new IcebergError(404, 'NoSuchNamespaceException', `Namespace does not exist: ${name}`);
export const noSuchTable = (name: string) =>
  new IcebergError(404, 'NoSuchTableException', `Table does not exist: ${name}`);
export const noSuchView = (name: string) =>
  new IcebergError(404, 'NoSuchViewException', `View does not exist: ${name}`);
export const alreadyExists = (what: string) =>
  new IcebergError(409, 'AlreadyExistsException', `${what} already exists`);
export const commitFailed = (message: string) => new IcebergError(409, 'CommitFailedException', message);

/** A table changed between the read a commit was built on and its swap: the commit may be re-applied. */
export class ConcurrentChange extends IcebergError {
  constructor(label: string) {
    super(409, 'CommitFailedException', `${label} changed concurrently; refresh and retry the commit`);
  }
}
export const notAuthorized = () =>
  new IcebergError(401, 'NotAuthorizedException', 'Not authorized: a valid bearer token is required');
/** The idempotency reservation was lost before commit: nothing was committed, the client retries. */
export const retryLater = (message: string) => new IcebergError(503, 'ServiceUnavailableException', message);
