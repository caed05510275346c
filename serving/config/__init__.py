"""Configuration: the typed stack settings (`settings`), the stack-file reader (`stack_yaml`,
`stack_config`), project discovery (`project`), bounded input readers (`inputs`) and network
ranges (`netrange`)."""
