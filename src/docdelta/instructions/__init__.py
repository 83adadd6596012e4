"""Instruction files: which files are instructions, which changed, and what each agent loads.

`detect` finds the changed instruction files between two refs (`InstructionMatcher`,
`detect`); `loading` is the loading graph per agent family (precedence, nested files,
`@imports`, always-loaded vs on-demand); `globs` holds every glob by gitignore rules;
`audit` is the injected-instruction audit (which files reached the model, from the
gateway's log). Import the module you need: `docdelta detect` imports only `detect`.
"""
