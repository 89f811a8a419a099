"""Loop-nest IR: what schedules rewrite, lowering refines, printers print and the interpreter runs."""
