"""The command line: `main` parses, dispatches and maps errors to exit codes
(`docdelta.errors.ExitCode`)."""
