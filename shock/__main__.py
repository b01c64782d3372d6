from shock.cli.app import main

main()
