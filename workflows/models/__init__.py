"""The contract between workflows and activities, one module per controller plus `common`."""
