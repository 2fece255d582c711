import type { ServerResponse } from 'node:http';
import type { Execution } from '@idem/core';
import { isResponseGone } from './client-gone.js';
import { settleOnResponse } from './settle-on-response.js';

/**
 * The `execute` branch on a Node.js response. When the client left while the key was being reserved, the
 * execution is aborted (the key released) and this returns a promise of `false`, fulfilled once the key is
 * released: run nothing for nobody. Otherwise the execution is settled by what happens to `res`
 * ({@link settleOnResponse}, attached before this returns) and this returns `true` at once: run the handler.
 *
 * @example
 * if (await startExecution(result.execution, res)) next();
 */
export function startExecution(execution: Execution, res: ServerResponse): true | Promise<false> {
  if (isResponseGone(res)) return execution.abort().then(() => false);
  settleOnResponse(execution, res);
  return true;
}
