// The extension's stylesheet as a module ("styleModule" in package.json): the frontend imports it
// with the extension (style/index.css lists the same files for tools that read CSS only).
import './agent-cells.css';
