from ddtree_bayes.cli import main

raise SystemExit(main())
