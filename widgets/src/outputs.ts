/**
 * The short summary of a code cell's outputs that `read` sends (at most {@link MAX_SUMMARY}
 * characters): an error's `ename: evalue` when there is one, else the start of the first text
 * output with its kind (`stdout`, `text/plain`, …), else the kinds of the outputs; then how many
 * outputs there are. A widget view (`application/vnd.jupyter.widget-view+json`, such as a chat
 * cell's turn) is only named — `widget view`, `2 widget views` — before any text: its `text/plain`
 * is the widget's repr (`VBox(children=(HTML(value='<style>…`), noise to the model. The kernel
 * shows the summary to the model as is, so it is plain and deterministic.
 */

import type * as nbformat from '@jupyterlab/nbformat';

/** The most characters one cell's summary has. */
export const MAX_SUMMARY = 300;

/** The most characters of a text output quoted in a summary. */
const QUOTE = 200;

/** The MIME type of a widget view output (ipywidgets). */
export const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';

/** Whether `output` shows a widget (its other MIME types are only the widget's fallbacks). */
function isWidgetView(output: nbformat.IOutput): boolean {
  if (output.output_type !== 'execute_result' && output.output_type !== 'display_data') {
    return false;
  }
  return WIDGET_VIEW in ((output.data ?? {}) as nbformat.IMimeBundle);
}

function text(value: nbformat.MultilineString | undefined): string {
  if (value === undefined) {
    return '';
  }
  return Array.isArray(value) ? value.join('') : value;
}

/** A field of an output as text: a string as is, anything else (a malformed output) as JSON. */
function field(value: unknown): string {
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}

function quote(s: string): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > QUOTE ? `${flat.slice(0, QUOTE)}…` : flat;
}

/** The kind of one output: `stdout`, `error`, or the MIME types of a rich output. */
function kind(output: nbformat.IOutput): string {
  switch (output.output_type) {
    case 'stream':
      return field(output.name);
    case 'error':
      return 'error';
    case 'execute_result':
    case 'display_data': {
      if (isWidgetView(output)) {
        return 'widget view';
      }
      const data = (output.data ?? {}) as nbformat.IMimeBundle;
      return Object.keys(data).join('+') || output.output_type;
    }
    default:
      return String(output.output_type);
  }
}

/** An error's `ename: evalue`, when an output is one. */
function errorLine(outputs: readonly nbformat.IOutput[]): string | null {
  for (const output of outputs) {
    if (output.output_type === 'error') {
      return `${field(output.ename)}: ${quote(field(output.evalue))}`;
    }
  }
  return null;
}

/** The first text an output that is not a widget view carries, with its kind. */
function textLine(outputs: readonly nbformat.IOutput[]): string | null {
  for (const output of outputs) {
    if (isWidgetView(output)) {
      continue;
    }
    if (output.output_type === 'stream') {
      return `${field(output.name)}: ${quote(text(output.text as nbformat.MultilineString))}`;
    }
    if (output.output_type === 'execute_result' || output.output_type === 'display_data') {
      const data = (output.data ?? {}) as nbformat.IMimeBundle;
      const plain = data['text/plain'] as nbformat.MultilineString | undefined;
      if (plain !== undefined) {
        return `text/plain: ${quote(text(plain))}`;
      }
    }
  }
  return null;
}

/** The summary of `outputs` (empty for none). */
export function summarize(outputs: readonly nbformat.IOutput[]): string {
  if (outputs.length === 0) {
    return '';
  }
  const count = `(${outputs.length} output${outputs.length === 1 ? '' : 's'})`;
  const widgets = outputs.filter(isWidgetView).length;
  const views = widgets === 0 ? null : widgets === 1 ? 'widget view' : `${widgets} widget views`;
  const quoted = textLine(outputs);
  const head =
    errorLine(outputs) ??
    (quoted === null
      ? [...new Set(outputs.map(kind))].join(', ')
      : [views, quoted].filter(part => part !== null).join('; '));
  const line = `${head} ${count}`;
  return line.length > MAX_SUMMARY ? `${line.slice(0, MAX_SUMMARY - 1)}…` : line;
}
