/** The session entry that keeps a `/tasks` output in the TUI's scrollback (never in the model's context). */
export const BOARD_ENTRY = "pi-tasks-board";
