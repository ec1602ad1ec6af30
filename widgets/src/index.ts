/**
 * The dsh-kernel notebook extension for JupyterLab 4 and Notebook 7 (issue 18;
 * docs/dev/notebook-comm.md): for every notebook panel, a `dsh.notebook` comm to its dsh kernel
 * through which the agent reads the notebook and inserts cells; the marks on the agent's cells
 * the user has not reviewed yet; and, on a dsh kernel, each code cell's editor mode from what the
 * kernel runs it as (a chat cell is edited as Markdown).
 */

import {
  ILabStatus,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';

import { closeAllOnUnload, NotebookComm } from './comm';
import { AgentMarks } from './marks';
import { CellModes } from './modes';

/** `jupyterlab` or `notebook` (Notebook 7), as `hello.frontend` says. */
function frontendName(app: JupyterFrontEnd): string {
  return /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'dsh-kernel:notebook',
  description: 'Lets the dsh agent read the open notebook and insert cells into it.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabStatus],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, status: ILabStatus | null): void => {
    const frontend = frontendName(app);
    const attach = (panel: NotebookPanel): void => {
      new NotebookComm(panel, frontend);
      void panel.context.ready.then(() => {
        if (!panel.isDisposed) {
          new AgentMarks(panel);
          new CellModes(panel);
        }
      });
    };
    // Lab asks before leaving a page with unsaved documents (`ILabStatus.isDirty`); a frontend
    // that provides no status gets the comms closed on pagehide only.
    closeAllOnUnload(window, () => status === null || status.isDirty);
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
  }
};

export default plugin;
