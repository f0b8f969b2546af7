from quicsm.cli.main import main

main()
