/**
 * The editor mode of each code cell of a notebook on a dsh kernel: a chat cell is edited as
 * Markdown (the mode of Lab's own Markdown cells), a SQL cell as SQL, a Python cell as the notebook
 * would have it (the kernel's language, IPython). What a cell is comes from {@link cellKind}, the
 * kernel's own reading (`cells.ts`).
 *
 * The mode follows the cell: typing `%%python` on a chat cell's first line makes it Python at once.
 * Lab sets every code cell's mode itself — when the kernel's `language_info` arrives, when a cell
 * is added or moved — so the mode is set again each time the cell's mime type changes to another
 * one. On a notebook whose kernel is not a dsh kernel nothing is touched; one that leaves a dsh
 * kernel gets Lab's mode back on every cell. The mode is the cell model's `mimeType`, which is
 * not part of the document: it is never saved and never makes the notebook dirty.
 *
 * The kernel is the session's when it has one, else the kernelspec the notebook was saved with, so
 * a notebook opened before its kernel starts already shows its chat cells as Markdown.
 */

import type { ICellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { CellChange } from '@jupyter/ydoc';

import { cellKind, DEFAULT_CELL, type CellKind, type DefaultCell } from './cells';

/** The editor mime type of a chat cell: Lab's Markdown cells' (Markdown with LaTeX math). */
export const CHAT_MIME = 'text/x-ipythongfm';

/** The editor mime type of a `%%sql` cell (CodeMirror's standard SQL). */
export const SQL_MIME = 'text/x-sql';

type Unhook = () => void;

/** What the notebook model's cell list says changed (removed and added cells). */
type CellsChange = { oldValues: readonly ICellModel[]; newValues: readonly ICellModel[] };

/** Keeps the editor mode of one notebook panel's code cells in step with what its kernel runs. */
export class CellModes {
  private readonly hooked = new Map<ICellModel, Unhook>();
  private defaultCell: DefaultCell | null = null;
  private disposed = false;

  constructor(private readonly panel: NotebookPanel) {
    const model = panel.content.model;
    if (model === null) {
      return;
    }
    panel.sessionContext.kernelChanged.connect(this.refresh, this);
    model.metadataChanged.connect(this.onMetadataChanged, this);
    model.cells.changed.connect(this.onCellsChanged, this);
    panel.disposed.connect(this.dispose, this);
    this.refresh();
  }

  /** The kind of cell `model` is on this notebook's dsh kernel (`null`: not a dsh notebook). */
  kindOf(model: ICellModel): CellKind | null {
    if (this.defaultCell === null || model.type !== 'code') {
      return null;
    }
    return cellKind(model.sharedModel.getSource(), this.defaultCell);
  }

  private kernelName(): string | null {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (kernel) {
      return kernel.name;
    }
    const spec: unknown = this.panel.content.model?.getMetadata('kernelspec');
    if (typeof spec === 'object' && spec !== null && 'name' in spec) {
      return typeof spec.name === 'string' ? spec.name : null;
    }
    return null;
  }

  /** Reads the notebook's kernel again and sets every code cell's mode. */
  private refresh(): void {
    if (this.disposed) {
      return;
    }
    const was = this.defaultCell;
    this.defaultCell = DEFAULT_CELL.get(this.kernelName() ?? '') ?? null;
    const notebook = this.panel.content;
    if (this.defaultCell === null) {
      if (was !== null) {
        // Left a dsh kernel: give every code cell the notebook's own mode back, then let go.
        this.unhookAll();
        for (const cell of notebook.widgets) {
          if (cell.model.type === 'code') {
            cell.model.mimeType = notebook.codeMimetype;
          }
        }
      }
      return;
    }
    for (const cell of notebook.widgets) {
      this.hook(cell.model);
      this.apply(cell.model);
    }
  }

  private onMetadataChanged(_: unknown, change: { key: string }): void {
    if (change.key === 'kernelspec') {
      this.refresh();
    }
  }

  private onCellsChanged(_: unknown, change: CellsChange): void {
    for (const model of change.oldValues) {
      this.hooked.get(model)?.();
      this.hooked.delete(model);
    }
    if (this.defaultCell === null) {
      return;
    }
    for (const model of change.newValues) {
      this.hook(model);
      this.apply(model);
    }
  }

  /** Follows one cell: its source (what it is) and its mime type (what Lab set it to). */
  private hook(model: ICellModel): void {
    if (model.type !== 'code' || this.hooked.has(model)) {
      return;
    }
    const onSource = (_: unknown, change: CellChange): void => {
      if (change.sourceChange !== undefined) {
        this.apply(model);
      }
    };
    const onMime = (): void => this.apply(model);
    model.sharedModel.changed.connect(onSource);
    model.mimeTypeChanged.connect(onMime);
    this.hooked.set(model, () => {
      if (!model.isDisposed) {
        model.sharedModel.changed.disconnect(onSource);
        model.mimeTypeChanged.disconnect(onMime);
      }
    });
  }

  /** Sets `model`'s mode to its kind's (a no-op when it already has it, so never a loop). */
  private apply(model: ICellModel): void {
    const kind = this.kindOf(model);
    if (kind === null || model.isDisposed) {
      return;
    }
    const mime =
      kind === 'chat' ? CHAT_MIME : kind === 'sql' ? SQL_MIME : this.panel.content.codeMimetype;
    if (model.mimeType !== mime) {
      model.mimeType = mime;
    }
  }

  private unhookAll(): void {
    this.hooked.forEach(unhook => unhook());
    this.hooked.clear();
  }

  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    this.unhookAll();
    this.panel.sessionContext.kernelChanged.disconnect(this.refresh, this);
    const model = this.panel.content.model;
    if (model !== null && !model.isDisposed) {
      model.metadataChanged.disconnect(this.onMetadataChanged, this);
      model.cells.changed.disconnect(this.onCellsChanged, this);
    }
    this.panel.disposed.disconnect(this.dispose, this);
  }
}
