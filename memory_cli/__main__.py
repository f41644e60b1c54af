from memory_cli.entry import main

main()
