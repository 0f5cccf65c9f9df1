from vedana.cli.app import main

main()
