/**
 * One notebook panel's `dsh.notebook` comm (docs/dev/notebook-comm.md, "Who opens the comm").
 *
 * The extension, never the kernel, opens it: once per kernel connection of the panel, as soon as
 * that kernel is idle and connected, and again after a restart (which closes every comm) or a
 * change of kernel. Only kernels of a dsh kernelspec (`dsh`, `dsh-python`) get a `comm_open`: any
 * other kernel has no such target and would answer with an error. Each request the kernel sends is
 * answered with exactly one message carrying `reply_to`. The comm is closed (`comm_close`) when the
 * panel goes — as its session context is disposed, while the kernel connection can still send —
 * and when the page is unloaded, so the kernel never keeps a comm nobody answers.
 *
 * When the notebook is renamed or moved, the open comm tells the kernel its new path (a `path`
 * message): jupyter-server named the notebook to the kernel once, at start, and the kernel reads
 * the course's AI policy from the file.
 *
 * The panel's node carries `data-dsh-notebook-comm` (`open`, `closed`, or `none` on a kernel that is
 * not a dsh kernel) so a person, or a browser test, can see the state without the kernel.
 */

import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { PartialJSONObject } from '@lumino/coreutils';

import { insertCells, readNotebook } from './notebook';
import {
  DSH_KERNELS,
  failure,
  type Hello,
  type PathChanged,
  PROTOCOL,
  TARGET,
  VERSION
} from './protocol';

type CommState = 'open' | 'closed' | 'none';

/** Answers one request from the kernel (the reply body, without `reply_to`). */
export function answer(panel: NotebookPanel, data: PartialJSONObject): PartialJSONObject {
  try {
    switch (data.request) {
      case 'read':
        return readNotebook(panel);
      case 'insert':
        return insertCells(panel, data.after, data.cells);
      default:
        return failure(
          'NOTEBOOK_UNKNOWN_REQUEST',
          `the notebook extension ${VERSION} does not know the request ${JSON.stringify(data.request)}`
        );
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return failure(
      data.request === 'insert' ? 'NOTEBOOK_INSERT_FAILED' : 'NOTEBOOK_READ_FAILED',
      `the notebook extension failed: ${message}`
    );
  }
}

/** The live comms of this page, closed when the page goes away (see {@link closeAllOnUnload}). */
const live = new Set<NotebookComm>();

/**
 * Sends `comm_close` for every open comm of the page when it is unloaded (closed, reloaded,
 * navigated away): the kernel would otherwise keep comms nobody answers. On `beforeunload` when
 * nothing is unsaved (`dirty()` false: the page will not ask to stay, and the message has until
 * the next page arrives to go out), else on `pagehide` (the user chose to leave; the browser may
 * drop the socket before the message goes). A page restored from the back/forward cache opens
 * them again.
 */
export function closeAllOnUnload(target: Window, dirty: () => boolean): void {
  const suspendAll = (): void => live.forEach(comm => comm.suspend());
  target.addEventListener('beforeunload', () => {
    if (!dirty()) {
      suspendAll();
    }
  });
  target.addEventListener('pagehide', suspendAll);
  target.addEventListener('pageshow', event => {
    if (event.persisted) {
      live.forEach(comm => comm.resume());
    }
  });
}

/** Opens and reopens the comm of one notebook panel for as long as the panel lives. */
export class NotebookComm {
  private comm: Kernel.IComm | null = null;
  private disposed = false;
  private kernel: Kernel.IKernelConnection | null = null;
  /** Whether this kernel (since it started, or last restarted) has yet to be sent a comm_open. */
  private due = false;

  constructor(
    private readonly panel: NotebookPanel,
    private readonly frontend: string
  ) {
    const session = panel.sessionContext;
    session.kernelChanged.connect(this.update, this);
    session.statusChanged.connect(this.update, this);
    session.connectionStatusChanged.connect(this.update, this);
    // Closing the tab disposes the document context, its session context and with it the kernel
    // connection, before the panel's own `disposed`: the session context's `disposed` comes first,
    // while the connection can still send the comm_close. The panel's covers a panel that goes
    // alone (one of two views of a notebook).
    session.disposed.connect(this.dispose, this);
    panel.disposed.connect(this.dispose, this);
    panel.context.pathChanged.connect(this.pathChanged, this);
    live.add(this);
    this.setState('closed');
    this.update();
  }

  private setState(state: CommState): void {
    this.panel.node.dataset.dshNotebookComm = state;
  }

  /**
   * Follows the panel's kernel: a new kernel, or a restart of this one (which disposes every comm
   * of the connection), makes a comm_open due; it is sent once the kernel is idle and connected.
   * A comm the kernel closed is not reopened until then: a kernel that refused the target would
   * refuse it again.
   */
  private update(): void {
    if (this.disposed) {
      return;
    }
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel !== this.kernel) {
      this.close();
      this.kernel = kernel;
      this.due = kernel !== null;
    }
    if (kernel === null || kernel.isDisposed) {
      this.setState('closed');
      return;
    }
    if (!DSH_KERNELS.has(kernel.name)) {
      this.setState('none');
      return;
    }
    if (kernel.status === 'restarting' || kernel.status === 'autorestarting') {
      this.forget(); // the process is going: a comm_close would reach its successor
      this.due = true;
      return;
    }
    if (this.comm !== null && this.comm.isDisposed) {
      this.comm = null; // disposed with the connection's state: the kernel is another process now
      this.due = true;
      this.setState('closed');
    }
    if (this.due && kernel.status === 'idle' && kernel.connectionStatus === 'connected') {
      this.open(kernel);
    }
  }

  private open(kernel: Kernel.IKernelConnection): void {
    this.due = false;
    if (!kernel.handleComms) {
      return; // this connection does not handle comms (another one of the page does)
    }
    const comm = kernel.createComm(TARGET);
    comm.onMsg = msg => this.onMsg(comm, msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        this.setState('closed');
      }
    };
    const hello: Hello = {
      protocol: PROTOCOL,
      path: this.panel.context.path,
      frontend: this.frontend,
      version: VERSION
    };
    comm.open(hello);
    this.comm = comm;
    this.setState('open');
  }

  /** The notebook was renamed or moved: tell the kernel where it is now. */
  private pathChanged(_context: unknown, path: string): void {
    const comm = this.comm;
    if (comm !== null && !comm.isDisposed) {
      const moved: PathChanged = { event: 'path', path };
      comm.send(moved);
    }
  }

  private onMsg(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as PartialJSONObject;
    if (typeof data.id !== 'string' || comm.isDisposed) {
      return; // not a request: nothing to answer
    }
    comm.send({ reply_to: data.id, ...answer(this.panel, data) });
  }

  private forget(): void {
    const comm = this.comm;
    this.comm = null;
    this.setState('closed');
    comm?.dispose();
  }

  private close(): void {
    const comm = this.comm;
    this.comm = null;
    this.setState('closed');
    if (comm !== null && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        comm.dispose(); // the kernel is gone: nothing to tell it
      }
    }
  }

  /** The page is going: close the comm (it is opened again if the page comes back). */
  suspend(): void {
    if (this.comm !== null) {
      this.close();
      this.due = true;
    }
  }

  /** The page came back from the back/forward cache. */
  resume(): void {
    this.update();
  }

  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    live.delete(this);
    const session = this.panel.sessionContext;
    session.kernelChanged.disconnect(this.update, this);
    session.statusChanged.disconnect(this.update, this);
    session.connectionStatusChanged.disconnect(this.update, this);
    session.disposed.disconnect(this.dispose, this);
    this.panel.context.pathChanged.disconnect(this.pathChanged, this);
    this.close();
  }
}
