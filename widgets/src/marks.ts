/**
 * The mark on the agent's unreviewed cells. A cell whose `metadata.dsh.by` is `agent` and that has
 * no `metadata.dsh.reviewed` gets the class `dsh-agent-cell` and a small "written by the agent"
 * label, whether it was inserted a moment ago or the notebook was reopened. The user's first edit
 * of its source, or its first run, removes the mark and sets `metadata.dsh.reviewed = true` (outside
 * the undo history: undoing the user's own next step must not bring the mark back, nor may the
 * review flag sit between an insertion and its undo).
 */

import type { Cell, ICellModel } from '@jupyterlab/cells';
import { NotebookActions, type NotebookPanel } from '@jupyterlab/notebook';
import type { CellChange } from '@jupyter/ydoc';
import type { PartialJSONObject } from '@lumino/coreutils';

/** The class on an unreviewed agent cell's node. */
export const MARK_CLASS = 'dsh-agent-cell';

/** The class of the label inside it. */
export const LABEL_CLASS = 'dsh-agent-label';

const LABEL_TEXT = 'written by the agent';

function provenance(model: ICellModel): PartialJSONObject | null {
  const dsh: unknown = model.getMetadata('dsh');
  return typeof dsh === 'object' && dsh !== null && !Array.isArray(dsh)
    ? (dsh as PartialJSONObject)
    : null;
}

/** Whether `model` is an agent's cell the user has neither edited nor run. */
export function unreviewed(model: ICellModel): boolean {
  const dsh = provenance(model);
  return dsh !== null && dsh.by === 'agent' && dsh.reviewed !== true;
}

function addMark(cell: Cell): void {
  if (cell.node.classList.contains(MARK_CLASS)) {
    return;
  }
  cell.node.classList.add(MARK_CLASS);
  const label = document.createElement('div');
  label.className = LABEL_CLASS;
  label.textContent = LABEL_TEXT;
  label.title = 'The agent wrote this cell; editing or running it marks it reviewed.';
  cell.node.appendChild(label);
}

function removeMark(cell: Cell): void {
  cell.node.classList.remove(MARK_CLASS);
  cell.node.querySelectorAll(`:scope > .${LABEL_CLASS}`).forEach(label => label.remove());
}

/** Marks `model` reviewed in its metadata (not an undoable step). */
function markReviewed(model: ICellModel): void {
  const dsh = provenance(model);
  if (dsh === null || dsh.reviewed === true) {
    return;
  }
  model.sharedModel.transact(() => {
    model.sharedModel.setMetadata('dsh', { ...dsh, reviewed: true });
  }, false);
}

/** Keeps the marks of one notebook panel in step with its cells. */
export class AgentMarks {
  private readonly watched = new WeakSet<ICellModel>();
  private pending = false;

  constructor(private readonly panel: NotebookPanel) {
    const notebook = panel.content;
    notebook.modelContentChanged.connect(this.schedule, this);
    NotebookActions.executionScheduled.connect(this.onRun, this);
    panel.disposed.connect(() => {
      NotebookActions.executionScheduled.disconnect(this.onRun, this);
    });
    this.sync();
  }

  /**
   * Syncs once the notebook has made the widgets of new cells: the model's change is signalled
   * before the notebook widget has handled it, so a sync at once would miss a cell just inserted.
   */
  private schedule(): void {
    if (this.pending) {
      return;
    }
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      if (!this.panel.isDisposed) {
        this.sync();
      }
    }, 0);
  }

  /** Marks every unreviewed agent cell of the panel and unmarks the rest. */
  sync(): void {
    for (const cell of this.panel.content.widgets) {
      if (unreviewed(cell.model)) {
        addMark(cell);
        this.watch(cell);
      } else {
        removeMark(cell);
      }
    }
  }

  private watch(cell: Cell): void {
    const model = cell.model;
    if (this.watched.has(model)) {
      return;
    }
    this.watched.add(model);
    const onChange = (_: unknown, change: CellChange): void => {
      if (change.sourceChange !== undefined && unreviewed(model)) {
        this.review(model);
      } else if (change.metadataChange !== undefined) {
        this.sync();
      }
    };
    model.sharedModel.changed.connect(onChange);
  }

  private onRun(_: unknown, args: { notebook: unknown; cell: Cell }): void {
    if (args.notebook === this.panel.content && unreviewed(args.cell.model)) {
      this.review(args.cell.model);
    }
  }

  private review(model: ICellModel): void {
    markReviewed(model);
    this.sync();
  }
}
