"""Tools that ship with the kernel. Each module builds its ``ToolDefinition`` from injected
collaborators (the kernel wires them), so the tools run and test without Jupyter."""

from dsh_kernel.tools.builtin.ask_user import Answer, Asker, Question, QuestionOption, ask_user_tool

__all__ = ["Answer", "Asker", "Question", "QuestionOption", "ask_user_tool"]
