/**
 * The dsh-kernel notebook extension for JupyterLab 4 and Notebook 7 (issue 18;
 * docs/dev/notebook-comm.md): for every notebook panel, a `dsh.notebook` comm to its dsh kernel
 * through which the agent reads the notebook and inserts cells, and the marks on the agent's cells
 * the user has not reviewed yet.
 */

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { closeAllOnUnload, NotebookComm } from './comm';
import { AgentMarks } from './marks';

/** `jupyterlab` or `notebook` (Notebook 7), as `hello.frontend` says. */
function frontendName(app: JupyterFrontEnd): string {
  return /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'dsh-kernel:notebook',
  description: 'Lets the dsh agent read the open notebook and insert cells into it.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    const frontend = frontendName(app);
    const attach = (panel: NotebookPanel): void => {
      new NotebookComm(panel, frontend);
      void panel.context.ready.then(() => {
        if (!panel.isDisposed) {
          new AgentMarks(panel);
        }
      });
    };
    // Lab asks before leaving a page with unsaved documents (`app.status.isDirty`); Notebook 7's
    // app may have no status: then the comms close on pagehide only.
    const status = (app as { status?: { isDirty?: boolean } }).status;
    closeAllOnUnload(window, () => status?.isDirty !== false);
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
  }
};

export default plugin;
