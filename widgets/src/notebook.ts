/**
 * What `read` and `insert` do to one notebook panel. Both work on the notebook's shared model — the
 * document the user sees, saved or not — and never on the `.ipynb` file: saving stays the user's.
 *
 * `insert` is all or nothing: the anchor and every new cell are checked first, then the cells go in
 * through one `insertCells` inside one transaction on the shared model, with the undo manager's
 * capture closed before and after, so a single undo removes exactly them (and collaborators see one
 * change, as for a user's paste).
 */

import type { NotebookPanel } from '@jupyterlab/notebook';
import type * as nbformat from '@jupyterlab/nbformat';
import type { ISharedCell, ISharedNotebook } from '@jupyter/ydoc';
import type { PartialJSONObject } from '@lumino/coreutils';

import { summarize } from './outputs';
import { failure, type IFailure, type INewCell, type IReadCell } from './protocol';

/** The `read` reply body (without `reply_to`). */
export function readNotebook(panel: NotebookPanel): PartialJSONObject {
  const model = panel.content.model;
  const cells: IReadCell[] = (model?.sharedModel.cells ?? []).map(readCell);
  return {
    ok: true,
    path: panel.context.path,
    dirty: model?.dirty ?? false,
    active_cell_id: panel.content.activeCell?.model.id ?? null,
    cells
  };
}

function readCell(cell: ISharedCell): IReadCell {
  const dsh = cell.getMetadata('dsh');
  const code = cell.cell_type === 'code';
  return {
    id: cell.id,
    cell_type: cell.cell_type,
    source: cell.getSource(),
    execution_count: code
      ? ((cell as { execution_count?: number | null }).execution_count ?? null)
      : null,
    outputs: code ? summarize((cell as { getOutputs(): nbformat.IOutput[] }).getOutputs()) : '',
    metadata_dsh: isObject(dsh) ? dsh : null
  };
}

function isObject(value: unknown): value is PartialJSONObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks one requested cell; the reason it cannot be inserted, or null. */
function invalid(cell: unknown, n: number): string | null {
  if (!isObject(cell)) {
    return `cell ${n} is not an object`;
  }
  if (cell.cell_type !== 'code' && cell.cell_type !== 'markdown') {
    return `cell ${n} has cell_type ${JSON.stringify(cell.cell_type)} (code or markdown only)`;
  }
  if (typeof cell.source !== 'string') {
    return `cell ${n} has no string source`;
  }
  if (cell.metadata !== undefined && !isObject(cell.metadata)) {
    return `cell ${n} has metadata that is not an object`;
  }
  return null;
}

interface IUndoCapture {
  stopCapturing(): void;
}

/** The shared model's undo manager, when it has one (it is not part of the public interface). */
function undoCapture(shared: ISharedNotebook): IUndoCapture | null {
  const manager = (shared as { undoManager?: Partial<IUndoCapture> | null }).undoManager;
  return manager && typeof manager.stopCapturing === 'function' ? (manager as IUndoCapture) : null;
}

/** Inserts `cells` below the cell `after`: the new ids, or a failure (then nothing was inserted). */
export function insertCells(
  panel: NotebookPanel,
  after: unknown,
  cells: unknown
): { ok: true; path: string; inserted: string[] } | IFailure {
  const model = panel.content.model;
  if (model === null) {
    return failure('NOTEBOOK_INSERT_FAILED', `${panel.context.path} has no model (is it closing?)`);
  }
  if (typeof after !== 'string') {
    return failure('NOTEBOOK_INSERT_FAILED', 'the request has no anchor cell id ("after")');
  }
  if (!Array.isArray(cells) || cells.length === 0) {
    return failure('NOTEBOOK_INSERT_FAILED', 'the request has no cells to insert');
  }
  for (let n = 0; n < cells.length; n++) {
    const reason = invalid(cells[n], n);
    if (reason !== null) {
      return failure('NOTEBOOK_INSERT_FAILED', reason);
    }
  }
  const shared = model.sharedModel;
  const index = shared.cells.findIndex(cell => cell.id === after);
  if (index < 0) {
    return failure(
      'NOTEBOOK_ANCHOR_GONE',
      `no cell with id ${after} in ${panel.context.path} (it was deleted or moved to another notebook)`
    );
  }
  const wanted = (cells as INewCell[]).map(cell => ({
    cell_type: cell.cell_type,
    source: cell.source,
    metadata: cell.metadata ?? {}
  }));
  const capture = undoCapture(shared);
  capture?.stopCapturing();
  let added: ISharedCell[] = [];
  shared.transact(() => {
    added = shared.insertCells(index + 1, wanted);
  });
  capture?.stopCapturing();
  // The path now, not the one `hello` sent: the user may have renamed the notebook since.
  return { ok: true, path: panel.context.path, inserted: added.map(cell => cell.id) };
}
