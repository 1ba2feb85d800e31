from ddtree_bayes.cli.main import main

raise SystemExit(main())
