"""The agent: handle, driver, turn/step loop, inbox, retry, hooks, prompt assembly."""
