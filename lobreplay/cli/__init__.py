"""The command line: main builds the parser from each venue's commands."""
