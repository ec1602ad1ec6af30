/**
 * The wire shapes of the `dsh.notebook` comm (docs/dev/notebook-comm.md): what the extension sends
 * when it opens the comm, the requests the kernel sends, and the replies. Declarations only.
 */

import type { PartialJSONObject } from '@lumino/coreutils';

/** The comm target the kernel registers (both kernels, `dsh` and `dsh-python`). */
export const TARGET = 'dsh.notebook';

/** The protocol version sent in `hello`; the kernel refuses what it does not know. */
export const PROTOCOL = 1;

/** This extension's version, as in widgets/package.json (a browser test pins the two together). */
export const VERSION = '0.1.0';

/** The kernelspec names whose kernels register the target; no other kernel is sent a comm_open. */
export const DSH_KERNELS: ReadonlySet<string> = new Set(['dsh', 'dsh-python']);

/** The `comm_open` data. */
export type Hello = {
  protocol: number;
  path: string;
  frontend: string;
  version: string;
};

/** Sent (no reply) when the notebook's path changes: it was renamed or moved. */
export type PathChanged = {
  event: 'path';
  path: string;
};

/** A cell as `read` reports it. */
export interface IReadCell extends PartialJSONObject {
  id: string;
  cell_type: string;
  source: string;
  execution_count: number | null;
  outputs: string;
  metadata_dsh: PartialJSONObject | null;
}

/** A cell `insert` is asked to add. */
export interface INewCell {
  cell_type: 'code' | 'markdown';
  source: string;
  metadata: PartialJSONObject;
}

/** The stable error codes a reply can carry. */
export type ErrorCode =
  | 'NOTEBOOK_ANCHOR_GONE'
  | 'NOTEBOOK_INSERT_FAILED'
  | 'NOTEBOOK_READ_FAILED'
  | 'NOTEBOOK_UNKNOWN_REQUEST';

/** A failed reply's body (without `reply_to`). */
export interface IFailure extends PartialJSONObject {
  ok: false;
  error: { code: ErrorCode; message: string };
}

/** Builds a failure body. */
export function failure(code: ErrorCode, message: string): IFailure {
  return { ok: false, error: { code, message } };
}
